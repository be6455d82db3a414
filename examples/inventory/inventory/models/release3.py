"""Release 3: the contract is done: only ``meta`` and ``display_name`` remain."""

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from migrations_policy.authoring import VersionedMixin

RELEASE = "3.0"
OBJECT_VERSIONS = {"Node": "1.1", "Port": "1.1"}


class Base(DeclarativeBase):
    pass


class Node(VersionedMixin, Base):
    __tablename__ = "nodes"
    VERSION = OBJECT_VERSIONS["Node"]

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    display_name: Mapped[str | None] = mapped_column(String(255))
    meta: Mapped[str | None] = mapped_column(Text)
    provision_state: Mapped[str] = mapped_column(String(15), server_default="enroll")


class Port(VersionedMixin, Base):
    __tablename__ = "ports"
    VERSION = OBJECT_VERSIONS["Port"]

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int | None] = mapped_column(Integer, ForeignKey("nodes.id", name="fk_ports_node_id_nodes"),
                                                index=True)
    address: Mapped[str] = mapped_column(String(18))


metadata = Base.metadata
