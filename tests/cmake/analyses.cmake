# stub: tests of analyses (being written)
