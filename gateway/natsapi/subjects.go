package natsapi

import (
	"fmt"
	"strings"

	"revd/bus"
)

// ServiceName is the name of the NATS micro service Serve registers.
const ServiceName = "revd"

// ServiceVersion is the version of the subject and payload scheme, reported
// by the micro service's INFO and PING replies.
const ServiceVersion = "1.0.0"

// DefaultSubjectPrefix is the first token of every subject unless
// Options.SubjectPrefix says otherwise: the bus's.
const DefaultSubjectPrefix = bus.DefaultSubjectPrefix

// Endpoint names: the part of a subject after the prefix.
const (
	EndpointRange       = "kv.range"
	EndpointPut         = "kv.put"
	EndpointDeleteRange = "kv.delete_range"
	EndpointTxn         = "kv.txn"
	EndpointCompact     = "kv.compact"
	EndpointStatus      = "maintenance.status"
)

// Subjects with the default prefix.
const (
	SubjectRange       = DefaultSubjectPrefix + "." + EndpointRange
	SubjectPut         = DefaultSubjectPrefix + "." + EndpointPut
	SubjectDeleteRange = DefaultSubjectPrefix + "." + EndpointDeleteRange
	SubjectTxn         = DefaultSubjectPrefix + "." + EndpointTxn
	SubjectCompact     = DefaultSubjectPrefix + "." + EndpointCompact
	SubjectStatus      = DefaultSubjectPrefix + "." + EndpointStatus
)

// Subject returns the subject of endpoint under prefix (DefaultSubjectPrefix
// when prefix is empty), e.g. Subject("", EndpointPut) == SubjectPut.
func Subject(prefix, endpoint string) string { return bus.Subject(prefix, endpoint) }

// validatePrefix accepts one or more dot-separated literal tokens.
func validatePrefix(prefix string) error {
	for _, tok := range strings.Split(prefix, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n*>") {
			return fmt.Errorf("natsapi: bad subject prefix %q: want dot-separated tokens without spaces or wildcards", prefix)
		}
	}
	return nil
}
