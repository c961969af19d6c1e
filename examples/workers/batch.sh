#!/bin/sh
# Processes one small batch and exits cleanly; the supervisor starts the next.
echo "batch: processed 10 items"
sleep 1
exit 0
