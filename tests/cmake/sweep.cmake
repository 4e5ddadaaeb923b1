# stub: tests of sweep (being written)
