"""The controller: election through /controller, the controller context, its single event queue,
and (as they land) the state machines, leader selectors, deletion and channel manager."""
