#!/bin/sh
# Ignores SIGTERM (as a worker stuck in a handler would): only SIGKILL ends it.
trap '' TERM
echo "stubborn: up, ignoring SIGTERM"
while :; do sleep 1; done
