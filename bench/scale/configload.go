package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/config"
)

// configShapes are the fleets whose configs are loaded: n programs of one
// instance each, the plain fleet's shape if it has more instances per
// program, and, from 1,000 up, n/10 programs of ten instances.
func configShapes(ns []int, instances int) [][2]int {
	var shapes [][2]int
	add := func(programs, k int) {
		if !slices.Contains(shapes, [2]int{programs, k}) {
			shapes = append(shapes, [2]int{programs, k})
		}
	}
	for _, n := range ns {
		add(n, 1)
		if instances > 1 {
			add(n/instances, instances)
		}
		if n >= 1000 && n%10 == 0 {
			add(n/10, 10)
		}
	}
	return shapes
}

// measureConfigLoad writes the config of programs x instances into dir and
// loads it with tend's config package runs+1 times (the first uncounted),
// as tend up does before it starts anything: parse, defaults, validation.
func measureConfigLoad(dir string, programs, instances, runs int) (ConfigLoad, error) {
	res := ConfigLoad{Programs: programs, Instances: instances}
	sleep, err := sleepPath()
	if err != nil {
		return res, err
	}
	data := fleetConfig(programs, instances, sleep, "", "")
	res.Bytes = len(data)
	file := filepath.Join(dir, fmt.Sprintf("load-%dx%d.toml", programs, instances))
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		return res, err
	}
	defer os.Remove(file)
	for i := range 1 + runs {
		t0 := time.Now()
		cfg, _, err := config.LoadWithDefaults(file)
		took := time.Since(t0)
		if err != nil {
			return res, err
		}
		if len(cfg.Programs) != programs {
			return res, fmt.Errorf("%s: %d programs loaded, want %d", file, len(cfg.Programs), programs)
		}
		if i > 0 {
			res.Samples = append(res.Samples, measure.NewMs(took))
		}
	}
	return res, nil
}
