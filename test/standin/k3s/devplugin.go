package main

import "github.com/sriov-lane/sriov-lane/test/standin/devplugin"

// allocatable computes the device plugin's resources from the fake sysfs;
// a variable so the agent's wiring stays independent of its implementation.
var allocatable = devplugin.Allocatable
