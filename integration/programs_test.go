package integration

var programSteps []string
