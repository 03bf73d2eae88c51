"""The read-only viewer (`lifesearch view`): run directories and judgments files served on a local port.

sources.py finds what to show and reads it, index.py keeps every decision as a compact column
store, query.py filters, sorts and pages it on the server, prompt.py marks what the judge did not
read, pages*.py write the HTML (every string escaped), server.py answers GET requests confined to
the directories given."""
