# stub: tests of report (being written)
