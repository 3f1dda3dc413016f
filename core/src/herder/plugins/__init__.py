"""Plugin discovery (:mod:`.loader`) and the typed hook facade (:mod:`.hooks`)."""
