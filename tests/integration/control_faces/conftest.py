"""Every control-plane test here must close what it opens on the shared PostgreSQL (stores, pools, engines):
``no_leaked_pg_connections`` (autouse) fails a test that leaves connections of this process open."""

from support.pg_conn_guard import no_leaked_pg_connections  # noqa: F401
