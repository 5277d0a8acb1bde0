import sys

from .training import main

sys.exit(main())
