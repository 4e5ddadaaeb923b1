# stub: tests of dataset (being written)
