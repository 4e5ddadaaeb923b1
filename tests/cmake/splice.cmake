# stub: tests of splice (being written)
