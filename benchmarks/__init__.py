"""Side-by-side measurements against the libraries people would use instead. Run: make bench"""
