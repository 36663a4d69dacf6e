"""`python -m fabric.demo`: the fabric-level demo (`fabric.row_demo`), a row broadcast,
multiply and chain reduction checked against numpy, with a summary and a PNG.

    python -m fabric.demo --rows 8 --cols 8 --n 64 --out out
"""

import sys

from fabric.row_demo import main, reference, row_reduce_program

__all__ = ["main", "reference", "row_reduce_program"]

if __name__ == "__main__":
    sys.exit(main())
