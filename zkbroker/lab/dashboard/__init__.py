"""The teaching dashboard (`zkbroker lab ui`, DESIGN §11): a read-only web view of a lab cluster, ZooKeeper's
truth beside each broker's view, history as pictures, the timeline, fault buttons, who is connected as whom,
scenarios, lessons, and one scenario on a ZooKeeper lab and a KRaft lab side by side."""
