package naming

// Paths inside the service and job containers (the contract).
const (
	ConfigDir      = "/etc/engram/config"
	TokensDir      = "/etc/engram/tokens"
	ConfigPath     = ConfigDir + "/" + KeyConfig
	TokensPath     = TokensDir + "/" + KeyTokens
	SigningKeyPath = TokensDir + "/" + KeySigningKey
	// TerminationLogPath is the kubelet's default terminationMessagePath:
	// the job writes its JSON summary there, the operator reads it back
	// from the pod's status.
	TerminationLogPath = "/dev/termination-log"
	// BinaryPath is the one binary of the image (operator, service, job).
	BinaryPath = "/manager"
)
