// Hive 2.3's own Thrift metastore (HiveMetaStore's HMSHandler and processor), served on a
// loopback address. HiveMetaStore.main cannot do that: Hive 2.3 binds its server socket to every
// interface (HiveAuthUtils.getServerSocket(null, port)); the bind-host setting came with Hive 3.
// Run by devtools/hive_metastore.py (HiveMetaStoreService) with `java -cp <jars> LoopbackMetastore.java
// <host>`: the handler reads hive-site.xml from the classpath, the server binds <host> on a port the
// kernel picks, and the one line on stdout says which port, once the handler is ready (its schema
// created, the default database there).
import java.net.InetSocketAddress;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.hadoop.hive.metastore.api.ThriftHiveMetastore;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;

public class LoopbackMetastore {
  public static void main(String[] args) throws Exception {
    HiveConf conf = new HiveConf(HiveMetaStore.HMSHandler.class);
    ThriftHiveMetastore.Iface handler =
        HiveMetaStore.newRetryingHMSHandler("loopback metastore", conf, false);
    TServerSocket socket = new TServerSocket(new InetSocketAddress(args[0], 0));
    TThreadPoolServer.Args serverArgs =
        new TThreadPoolServer.Args(socket)
            .processor(new TSetIpAddressProcessor<>(handler))
            .protocolFactory(new TBinaryProtocol.Factory())
            .minWorkerThreads(2)
            .maxWorkerThreads(64);
    TThreadPoolServer server = new TThreadPoolServer(serverArgs);
    System.out.println("listening " + socket.getServerSocket().getLocalPort());
    System.out.flush();
    server.serve();
  }
}
