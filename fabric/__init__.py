"""wafer-fabric's simulator: a vectorized JAX model of a wafer-scale dataflow fabric.

Public API:
    FabricConfig            the machine (presets wse2, wse3, small)
    Program, Tile, Rect     programs as plain data; Port for routes
    instructions            DSDs, operands and instructions of tasks
    row_demo                the fabric-level demo (`python -m fabric.demo`): its program
                            and numpy reference
    build, Tables           Program -> dense tables (tile_colors: the colors a tile uses)
    assign_part_colors      colors for programs that are to share one fabric, different
                            wherever their routes meet (ColorPart in, ColorAssignment out)
    Simulator               host session: memcpy, launch, run, stats, save, load
    host_io_cycles          what a host transfer of a rectangle's words costs
    host_streams            I/O channels a host transfer streams on (edge_channels: per edge)
    save_checkpoint, load_checkpoint, CheckpointError   checkpoints of a session
    write_atomic            a file written whole or not at all (checkpoints use it)
    FabricState, init_state, step, run   the engine itself
    Stats                   counters of a run
    Trace                   a recorded timeline (Simulator.record), Chrome trace-event JSON
    Window, window_for      a program inside a box of PEs simulated on a smaller grid that
                            holds it (whole_fabric: the window that is the fabric)
"""

from fabric import instructions, row_demo
from fabric.build import ProgramInfo, Tables, build, program_table_rows, tile_colors
from fabric.checkpoint import CheckpointError, save_checkpoint, write_atomic
from fabric.colors import ColorAssignment, ColorNode, ColorPart, assign_part_colors
from fabric.config import FabricConfig
from fabric.engine import run, step
from fabric.errors import BuildError, CycleLimitError, DeadlockError, FabricError, RunError
from fabric.host import Simulator, load_checkpoint
from fabric.host_io import edge_channels, host_io_cycles, host_streams
from fabric.isa import Port
from fabric.merge import MergedProgram, MergeError, Part, merge_programs
from fabric.part_report import PartMap, stuck_parts
from fabric.part_state import restore_part
from fabric.program import Program, Rect, Tile
from fabric.state import FabricState, init_state
from fabric.stats import Stats
from fabric.trace import Trace
from fabric.window import Window, whole_fabric, window_for

__all__ = [
    "assign_part_colors", "BuildError", "CheckpointError", "ColorAssignment", "ColorNode",
    "ColorPart", "CycleLimitError", "DeadlockError", "FabricConfig", "FabricError",
    "FabricState", "MergeError", "MergedProgram", "Part", "PartMap", "Port", "Program",
    "ProgramInfo",
    "Rect", "RunError", "Simulator", "Stats", "Tables", "Tile", "Trace", "build",
    "edge_channels", "host_io_cycles", "host_streams", "init_state", "instructions",
    "load_checkpoint", "merge_programs", "program_table_rows", "row_demo", "run",
    "restore_part", "save_checkpoint", "step", "stuck_parts",
    "tile_colors", "whole_fabric", "Window", "window_for", "write_atomic",
]
