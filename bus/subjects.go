package bus

// DefaultSubjectPrefix is the first token of revd's subjects (the commit
// feed's, the NATS API's) unless configured otherwise.
const DefaultSubjectPrefix = "revd"

// Subject returns the subject of endpoint under prefix (DefaultSubjectPrefix
// when prefix is empty): prefix + "." + endpoint.
func Subject(prefix, endpoint string) string {
	if prefix == "" {
		prefix = DefaultSubjectPrefix
	}
	return prefix + "." + endpoint
}
