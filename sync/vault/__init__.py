"""The server: the Hrana transport, the one retry loop, the schema and the vault interface
(`store.Vault`): the only place that writes SQL against the server's tables."""
