"""Release 2: ``meta`` replaces ``extra``, ``display_name`` (255) replaces ``name`` (64),
object tables get a ``version`` column (``VersionedMixin``: indexed, written from
``VERSION`` or the pinned release's version), and ports reference nodes.

During the rolling upgrade release-1 services still read and write ``extra`` and
``name``, so release 2 keeps mapping them and writes both the old and the new
column; online data migrations copy what release 1 wrote.
"""

from sqlalchemy import ForeignKey, Integer, String, Text, event
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from migrations_policy.authoring import VersionedMixin

RELEASE = "2.0"
OBJECT_VERSIONS = {"Node": "1.1", "Port": "1.1"}


class Base(DeclarativeBase):
    pass


class Node(VersionedMixin, Base):
    __tablename__ = "nodes"
    VERSION = OBJECT_VERSIONS["Node"]

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    name: Mapped[str | None] = mapped_column(String(64))
    display_name: Mapped[str | None] = mapped_column(String(255))
    extra: Mapped[str | None] = mapped_column(Text)
    meta: Mapped[str | None] = mapped_column(Text)
    provision_state: Mapped[str] = mapped_column(String(15), server_default="enroll")


class Port(VersionedMixin, Base):
    __tablename__ = "ports"
    VERSION = OBJECT_VERSIONS["Port"]

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int | None] = mapped_column(Integer, ForeignKey("nodes.id", name="fk_ports_node_id_nodes"),
                                                index=True)
    address: Mapped[str] = mapped_column(String(18))


@event.listens_for(Node, "before_insert")
@event.listens_for(Node, "before_update")
def _write_both_columns(mapper, connection, node: Node) -> None:
    """Keep the old columns filled for release-1 readers (and the new ones for us)."""
    if node.meta is None and node.extra is not None:
        node.meta = node.extra
    else:
        node.extra = node.meta
    if node.display_name is None and node.name is not None:
        node.display_name = node.name
    elif node.display_name is not None:
        node.name = node.display_name[:64]


metadata = Base.metadata
