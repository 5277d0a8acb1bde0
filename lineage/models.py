# Expert kernels, transitions and skill cards arrive with the KLineage issue; the app is
# installed now so that settings, URLs and migrations need no reshuffle then.
