#!/bin/sh
# Crashes a few seconds after start, like a worker with a bad dependency.
echo "crasher: connecting to the queue"
sleep 3
echo "crasher: connection refused" >&2
exit 1
