"""Each kind of record besides a memory's row: read for sealing and applied on pull or restore
(push, pull and restore share them, so none of those imports another)."""
