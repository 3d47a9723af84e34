"""Receiving: pages of records after this device's cursor, merged and applied."""
