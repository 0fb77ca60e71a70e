"""Operations sent to a running graphrecall HTTP server instead of run in this process: the client
(``remote.client``), the request each operation of the table becomes (``remote.requests``), the file a server
leaves under the root it holds (``remote.discovery``) and the choice of server (``remote.connect``)."""
