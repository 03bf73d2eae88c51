"""The deep-research agent harness: a ReAct loop over web_search, web_fetch and a sandboxed python tool."""
