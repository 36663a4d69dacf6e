"""Training on the simulated fabric: the forward and backward graphs of a step, optimizers,
loss scaling (`GradScaler`, `optimizer_step`), checkpoints, and the Trainer that runs a loop
of them (or the same loop in eager PyTorch)."""

from frontend.training.callbacks import Callback, ProgressPrinter
from frontend.training.checkpoint import CheckpointReport, load_checkpoint, save_checkpoint
from frontend.training.graphs import JointGraphs, joint_graphs
from frontend.training.scaler import GradScaler, optimizer_step
from frontend.training.specs import Backend, backend
from frontend.training.step import TrainingStep, compile_training_step
from frontend.training.trainer import Trainer

__all__ = ["Backend", "Callback", "CheckpointReport", "GradScaler", "JointGraphs",
           "ProgressPrinter", "Trainer", "TrainingStep", "backend", "compile_training_step",
           "joint_graphs", "load_checkpoint", "optimizer_step", "save_checkpoint"]
