"""Inventory: a small bare-metal inventory service (nodes and their ports), as in ironic.

Its schema evolves over three releases, each with its own SQLAlchemy models in
``inventory.models.releaseN`` so that "release N code against release N+1
schema" can be exercised:

* release 1: ``nodes(id, uuid, name VARCHAR(64), extra TEXT, provision_state)``
  and ``ports(id, node_id, address)`` with no foreign key.
* release 2 (expand): ``nodes.meta`` replaces ``extra``; ``nodes.display_name``
  VARCHAR(255) replaces ``name`` (a resize done as add-new / copy / drop-old);
  a ``version`` column on both object tables; the ports -> nodes foreign key
  added without locking (NOT VALID on PostgreSQL); release-2 code writes both
  the old and the new columns so release-1 code keeps working.
* release 3 (contract): ``extra`` and ``name`` dropped, the foreign key validated.
"""
