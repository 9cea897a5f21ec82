import sys

from zkbroker.cli import main

sys.exit(main())
