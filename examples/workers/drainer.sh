#!/bin/sh
# Grows, notices it is over its own memory cap, and drains: exit 12.
echo "drainer: working"
sleep 4
echo "drainer: RSS over budget, draining" >&2
exit 12
