"""The tables of the state database, one family a module: the statements that store and read its records.

Each class is a set of :class:`~herder.state.store.Store`'s methods over one
table (or a table and those it owns), written against the commit engine
(:class:`~herder.state.database.Database`): its writes are functions given to
:meth:`~herder.state.database.Database.write`, its reads
:meth:`~herder.state.database.Database.query`. A record's fields are its
table's columns, by name and in order (:mod:`herder.state.tables.rows`).
"""
