"""The snapshot service: Unix-socket server, wire protocol, client, daemon,
watch operations.
"""
