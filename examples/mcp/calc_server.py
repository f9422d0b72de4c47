"""A small MCP server (FastMCP, over stdio) for examples/mcp_tools.py: unit prices and arithmetic.

Run by the example (``MCPTools(command=[python, this file])``); on its own it waits for an MCP
client on stdin/stdout.
"""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP

server = FastMCP("shop")

PRICES = {"kettle": 39.0, "toaster": 25.5, "mug": 7.25}


@server.tool()
def price_of(item: str) -> float:
    """The price of one product in euros (kettle, toaster or mug)."""
    if item not in PRICES:
        raise ValueError(f"no product {item!r}; products: {', '.join(PRICES)}")
    return PRICES[item]


@server.tool()
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


if __name__ == "__main__":
    server.run()
