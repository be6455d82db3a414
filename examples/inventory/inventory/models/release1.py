"""Release 1 of the inventory: free-form ``extra`` text and a short ``name``."""

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

RELEASE = "1.0"


class Base(DeclarativeBase):
    pass


class Node(Base):
    __tablename__ = "nodes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    name: Mapped[str | None] = mapped_column(String(64))
    extra: Mapped[str | None] = mapped_column(Text)
    provision_state: Mapped[str] = mapped_column(String(15), server_default="enroll")


class Port(Base):
    __tablename__ = "ports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int | None] = mapped_column(Integer)
    address: Mapped[str] = mapped_column(String(18))


metadata = Base.metadata
