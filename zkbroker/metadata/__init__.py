"""The cluster's metadata as KRaft brokers and controllers hold it: the registrations built from metadata records
(one place says what each record does to a partition or a broker), and a broker's MetadataImage and MetadataDelta."""
