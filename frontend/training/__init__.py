"""Training on the simulated fabric: the forward and backward graphs of a step."""

from frontend.training.graphs import JointGraphs, joint_graphs
from frontend.training.step import TrainingStep, compile_training_step

__all__ = ["JointGraphs", "TrainingStep", "compile_training_step", "joint_graphs"]
