"""Keys and devices: epochs and their keys, rotation, the roster and its pin, enrolling,
pairing, the device list and the secret store."""
