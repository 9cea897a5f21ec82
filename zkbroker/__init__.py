"""zkbroker: the broker and everything the three packages share.

Wire codec (protocol/), log (log/), ZooKeeper layout (zk/), network server (server/), client (client/),
the `zkbroker` command line (cli.py) and the local lab (lab/).
"""

__version__ = "0.1.0"
