"""`python -m tabd.daemon` is `tabd`."""
import sys

from tabd.daemon.cli import main

sys.exit(main())
