import sys

from herder_nomad.plugin import main

sys.exit(main())
