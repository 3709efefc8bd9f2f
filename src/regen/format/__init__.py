"""The output format of a run, and nothing else: where its files live (`layout`), how shards
are named (`names`), written and sealed (`writer`) and indexed (`sidecar`), what the manifest
holds (`manifest`), which part of the input a process does (`part`) and the states a run
records (`state`). Everything that reads or writes a run imports it; it imports none of them.
"""
