package naming

// Paths inside the service and job containers (the contract).
const (
	ConfigDir      = "/etc/engram/config"
	TokensDir      = "/etc/engram/tokens"
	ConfigPath     = ConfigDir + "/" + KeyConfig
	TokensPath     = TokensDir + "/" + KeyTokens
	SigningKeyPath = TokensDir + "/" + KeySigningKey
	// TLSDir holds spec.service.tls's Secret: a kubernetes.io/tls Secret's
	// keys tls.crt and tls.key.
	TLSDir      = "/etc/engram/tls"
	TLSCertPath = TLSDir + "/tls.crt"
	TLSKeyPath  = TLSDir + "/tls.key"
	// TerminationLogPath is the kubelet's default terminationMessagePath:
	// the job writes its JSON summary there, the operator reads it back
	// from the pod's status.
	TerminationLogPath = "/dev/termination-log"
	// ExportDir is where a RetentionJob's export PVC (spec.export.pvc) is
	// mounted in the job container.
	ExportDir = "/var/lib/engram/export"
	// BinaryPath is the one binary of the image (operator, service, job).
	BinaryPath = "/manager"
)
