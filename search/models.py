# Runs, nodes and their events arrive with the search issue; the app is installed now so
# that settings, URLs and migrations need no reshuffle then.
