"""SDF apps that ship with nexthop (see :mod:`nexthop.sdf`)."""
