import sys

from review_copies.cli import main

sys.exit(main())
