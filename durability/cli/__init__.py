"""The `durability` command line: thin click commands over the library.
"""
