"""Training on the simulated fabric: the forward and backward graphs of a step,
and checkpoints."""

from frontend.training.checkpoint import CheckpointReport, load_checkpoint, save_checkpoint
from frontend.training.graphs import JointGraphs, joint_graphs
from frontend.training.step import TrainingStep, compile_training_step

__all__ = ["CheckpointReport", "JointGraphs", "TrainingStep", "compile_training_step",
           "joint_graphs", "load_checkpoint", "save_checkpoint"]
